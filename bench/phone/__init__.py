"""What the phone is: identity, device state, NPU fingerprint, overflow adapters."""
