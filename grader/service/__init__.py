"""The grading server: HTTP API, auth, course policy, job leasing (no learner code here)."""
