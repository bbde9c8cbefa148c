"""Pool model backends. Each module owns one kind; `registry` maps kind names to them."""
