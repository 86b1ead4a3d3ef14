"""The words shown when jin runs on its embedded demo model."""

EMBEDDED_BANNER = (
    "jin is answering with the embedded SmolLM2-135M: fine for a demo, not for real use. "
    "Set JIN_BRAIN_URL and JIN_BRAIN_MODEL to use a real model."
)
