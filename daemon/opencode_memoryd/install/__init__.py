"""Integration with the host: systemd user units and launchd agents."""
