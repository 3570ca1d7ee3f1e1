//! A weather tool in Rust: the current temperature and wind at a place, from Open-Meteo's
//! forecast API (no key) through the gateway's HTTP import. Served with
//! `[mcp_servers.weather] plugin = "rust-tool"` and
//! `allowed_hosts = ["https://api.open-meteo.com"]`: callers see `weather__current`.
use gateway_plugin_sdk::http::Request;
use gateway_plugin_sdk::tool::*;
use serde::Deserialize;
use serde_json::{Value, json};

struct Weather;

#[derive(Deserialize)]
struct Place {
    latitude: f64,
    longitude: f64,
}

/// `base_url`: another server of Open-Meteo's API (a mirror, or a test's).
#[derive(Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
struct Settings {
    base_url: Option<String>,
}

impl Tools for Weather {
    fn info() -> PluginInfo {
        PluginInfo::new("rust-tool", env!("CARGO_PKG_VERSION"), Vec::new())
    }

    fn tools(_context: &Context) -> Vec<ToolDef> {
        let degrees = |max: i32| json!({"type": "number", "minimum": -max, "maximum": max});
        let place = json!({"type": "object", "required": ["latitude", "longitude"],
            "properties": {"latitude": degrees(90), "longitude": degrees(180)}});
        let weather = json!({"type": "object", "properties": {"time": {"type": "string"},
            "temperature_c": {"type": "number"}, "wind_kmh": {"type": "number"}}});
        let about = "The current temperature (°C) and wind speed (km/h) at a place";
        vec![
            ToolDef::new("current", about, place)
                .output_schema(weather)
                .read_only(),
        ]
    }

    fn call(name: &str, arguments: Arguments, context: &Context) -> Result<ToolResult, ToolError> {
        let Place {
            latitude,
            longitude,
        } = arguments.parse()?;
        if name != "current" {
            return Err(ToolError::unknown(name));
        } else if latitude.abs() > 90.0 || longitude.abs() > 180.0 {
            // A result, not an error: the model reads it and can try again.
            return Ok(ToolResult::error(
                "latitude is -90 to 90, longitude -180 to 180",
            ));
        }
        let settings: Settings = context.settings()?;
        let base = settings
            .base_url
            .as_deref()
            .unwrap_or("https://api.open-meteo.com");
        let url = format!(
            "{base}/v1/forecast?latitude={latitude}&longitude={longitude}\
                           &current=temperature_2m,wind_speed_10m"
        );
        let answer: Value = Request::get(url).send()?.error_for_status()?.json()?;
        let now = &answer["current"];
        Ok(ToolResult::structured(json!({"time": now["time"],
            "temperature_c": now["temperature_2m"], "wind_kmh": now["wind_speed_10m"]})))
    }
}

export_tool!(Weather);
