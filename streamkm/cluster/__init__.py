"""Online clustering estimators."""
