"""GPU hygiene through NVML: inventory, pre-flight checks, clocks, setup/reset, machine file."""
