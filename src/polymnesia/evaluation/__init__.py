"""Evaluation of models per language: likelihood, representations, generation, tasks."""
