//! Shared fixtures of toolguard's integration tests and examples.
