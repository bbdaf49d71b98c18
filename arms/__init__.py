"""Evidence views: every arm is `select(question, memory) -> Evidence`."""
