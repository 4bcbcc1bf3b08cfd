"""Statistics and decisions: confidence bounds, uncertainty budgets, sequential looks, onsets."""
