"""The words shown when jin runs on its embedded demo model."""

EMBEDDED_BANNER = (
    "jin is answering with the embedded SmolLM2-135M: fine for a demo, not for real use. "
    "Set JIN_BRAIN_URL and JIN_BRAIN_MODEL to use a real model."
)

OPEN_BANNER = (
    "NO API KEYS: callers on this machine are let in without one, as tenant 'default' (only on "
    "a loopback address, never through a proxy). Create a key with `jin keys create --tenant "
    "<tenant>`; from then on every route but /healthz and /readyz needs one, for good."
)
