"""The pure review path: one AdmissionReview in, one JSON patch out. No I/O, no globals."""
