"""Fixtures of the SDK suite: the scenario the runner (tests/e2e/surfaces/clients.rs) describes and one client
of each official SDK pointed at the gateway."""

import os

import anthropic
import openai
import pytest

import scenario as sc

# Either SDK reads these when the code leaves a setting out, and httpx sends requests for
# 127.0.0.1 through a proxy named here: the suite's requests must go exactly where it says.
_AMBIENT = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_ORG_ID",
    "OPENAI_PROJECT_ID",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "CO_API_KEY",
    "CO_API_URL",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
)

# Generous for a loaded CI machine, but a hang still ends.
TIMEOUT_SECONDS = 60


def pytest_configure(config):
    if not os.environ.get(sc.SCENARIO_VAR):
        raise pytest.UsageError(
            f"{sc.SCENARIO_VAR} is not set: this suite runs through its runner, which starts "
            "the gateway and the fake upstreams: `cargo xtask test`, or "
            "`GATEWAY_CLIENTS_PYTHON=target/clients-venv/bin/python cargo test --release "
            "-p gateway --test e2e -- clients::` (see tests/clients/README.md)"
        )
    for var in _AMBIENT:
        os.environ.pop(var, None)


@pytest.fixture(scope="session")
def scenario():
    return sc.load()


@pytest.fixture(scope="session")
def openai_client(scenario):
    # No retries: a 429 or 5xx must reach the test as the SDK's exception, at once.
    return openai.OpenAI(
        base_url=f"{scenario['url']}/v1",
        api_key=scenario["key"],
        max_retries=0,
        timeout=TIMEOUT_SECONDS,
    )


@pytest.fixture(scope="session")
def anthropic_client(scenario):
    return anthropic.Anthropic(
        base_url=scenario["url"],
        api_key=scenario["key"],
        max_retries=0,
        timeout=TIMEOUT_SECONDS,
    )
