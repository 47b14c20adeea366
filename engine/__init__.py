"""The engine room: runtime adaptations that rely on framework internals, each module stating
what it relies on; tests/test_engine_pins.py pins every private name they use. The ground floor:
it imports no app and nothing of the project package (tests/test_import_graph.py)."""
