//! Open-Meteo's forecast API (`GET /v1/forecast`) as the fake serves it, for the example tool
//! plugin that calls it: the `current` weather computed from the query (the temperature is
//! a tenth of the latitude, the wind a tenth of the longitude, so tests know what to expect);
//! errors as `{"error": true, "reason"}`, as Open-Meteo answers them.

use serde_json::json;

use super::{Provider, ReceivedRequest, Reply};

/// Open-Meteo's forecast API.
pub struct OpenMeteo;

impl Provider for OpenMeteo {
    const NAME: &'static str = "fake-open-meteo";

    fn is_generation(path: &str) -> bool {
        path == "/v1/forecast"
    }

    fn computed(request: &ReceivedRequest) -> Option<Reply> {
        if request.path_only() != "/v1/forecast" {
            return None;
        }
        let query = request.path.split_once('?').map_or("", |(_, query)| query);
        let number = |name: &str| {
            query
                .split('&')
                .filter_map(|pair| pair.split_once('='))
                .find(|(key, _)| *key == name)
                .and_then(|(_, value)| value.parse::<f64>().ok())
        };
        let (Some(latitude), Some(longitude)) = (number("latitude"), number("longitude")) else {
            return Some(Self::error(
                400,
                "Parameter 'latitude' and 'longitude' must be set.",
            ));
        };
        Some(Reply::json(
            200,
            &json!({
                "latitude": latitude,
                "longitude": longitude,
                "generationtime_ms": 0.03,
                "utc_offset_seconds": 0,
                "timezone": "GMT",
                "timezone_abbreviation": "GMT",
                "elevation": 38.0,
                "current_units": {"time": "iso8601", "interval": "seconds",
                    "temperature_2m": "°C", "wind_speed_10m": "km/h"},
                "current": {"time": "2026-11-28T12:00", "interval": 900,
                    "temperature_2m": latitude / 10.0, "wind_speed_10m": longitude / 10.0},
            }),
        ))
    }

    fn error(status: u16, message: &str) -> Reply {
        Reply::json(status, &json!({"error": true, "reason": message}))
    }
}
