"""The budgeted resources, by name: shared by usage records, contract budgets and the stop
policy (kept free of imports so the should-run path stays light)."""

RESOURCES: tuple[str, ...] = ("gpu_hours", "cpu_hours", "storage_gb", "download_gb",
                              "experiments")


def sum_usage(total: float, increment: float) -> float:
    """``total + increment`` rounded to nine decimals, so that 0.7 + 0.2 + 0.1 hours exhausts a
    budget of 1.0: binary float noise must never decide whether a campaign stops."""
    return round(total + increment, 9)
