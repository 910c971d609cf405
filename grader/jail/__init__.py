"""Running learner code away from the grade.

launcher.py (trusted) starts a warm zygote in bubblewrap, or a plain process as the fallback;
zygote.py and sandbox.py (jail side) fork and close one jail per submission; worker.py (jail
side) imports the learner's modules and answers requests; wire.py (both sides) is the bytes-only
format; client.py (trusted) is one jail with deadlines and the errors a jail can end with;
doctor.py (trusted) runs probe.py's canary attacks in a real jail and refuses to grade if one
succeeds.
"""
