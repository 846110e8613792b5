"""The AdmissionReview codec and the one engine that runs the policies. Knows no HTTP."""
