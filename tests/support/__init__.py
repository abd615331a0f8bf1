"""Reusable helpers for tests and benchmarks (throwaway servers, data builders)."""
