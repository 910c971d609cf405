"""Running learner code away from the grade: a worker process and a bytes-only wire format."""
