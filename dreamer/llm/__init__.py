"""The model adapter: the OpenAI-compatible client, its retries, breaker and bill, the prompt
cards (`cards/`), and the scripted server the tests and the demo talk to (`scripted/`).

May import: `dreamer.core`."""
