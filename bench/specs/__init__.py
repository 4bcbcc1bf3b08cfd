"""What is expected: SLA profiles, firmware profiles, the claims, reference outputs and model."""
