"""The host imports the tests need everywhere, natively: componentize-py's stub bindings raise
`NotImplementedError` for every import, so the log keeps lines in `LINES` (debug off) instead.
Tests replace `http.send` and `sink.send` themselves (`unittest.mock.patch`)."""

from wit_world.imports import log

LINES = []

log.log = lambda level, message: LINES.append((level, message))
log.enabled = lambda level: level.value >= log.Level.INFO.value
