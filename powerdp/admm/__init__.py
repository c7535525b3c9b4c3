"""The distributed solve: configuration, algorithms, zone agents, coordinator, runner, backends."""
