"""Long-term memory (semantic, episodic, procedural): schema, storage and ranking."""
