"""virgo-web's configuration: what the environment says, or a clear refusal naming the variable."""

import pytest

from virgo.web import ConfigurationError, options_from


def test_defaults_are_loopback_four_threads_and_a_memory_ceiling() -> None:
    options = options_from({})
    assert (options.host, options.port) == ("127.0.0.1", 8000)
    assert options.workers >= 1
    assert options.threads == 4
    assert options.max_rss_mib == 512
    assert options.access_log is True


def test_every_knob_is_read_from_the_environment() -> None:
    options = options_from(
        {
            "VIRGO_BIND": "[::1]:9001",
            "WEB_CONCURRENCY": "3",
            "WEB_THREADS": "8",
            "WEB_WORKER_MAX_RSS": "0",
            "WEB_ACCESS_LOG": "0",
            "LOG_LEVEL": "WARNING",
        }
    )
    assert (options.host, options.port, options.workers, options.threads) == ("::1", 9001, 3, 8)
    assert options.max_rss_mib is None
    assert options.access_log is False
    assert options.log_level.value == "warning"


@pytest.mark.parametrize(
    ("variable", "value", "reason"),
    [
        ("VIRGO_BIND", "8000", "is not host:port"),
        ("VIRGO_BIND", "127.0.0.1:http", "is not host:port"),
        ("VIRGO_BIND", "127.0.0.1:70000", "is not host:port"),
        ("WEB_CONCURRENCY", "0", "is not a whole number of 1 or more"),
        ("WEB_THREADS", "four", "is not a whole number of 1 or more"),
        ("WEB_WORKER_MAX_RSS", "-1", "is not a whole number of 0 or more"),
        ("LOG_LEVEL", "loud", "is not one of"),
    ],
)
def test_a_value_it_cannot_use_is_refused_naming_the_variable(
    variable: str, value: str, reason: str
) -> None:
    with pytest.raises(ConfigurationError, match=rf"^{variable}: '{value}' {reason}"):
        options_from({variable: value})
