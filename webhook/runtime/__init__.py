"""Running a long-lived component: logs, error answers, probes, TLS reload, leader election, one run loop."""
