"""External memory providers: the protocol every provider speaks (`contract`), the registry that
finds them by entry point (`registry`), the guard that keeps a failing one away from the agent
(`guard`: deadline, breaker, background sync), and the mem0 OSS provider (`mem0`)."""
