"""The accuracy sweep: settings, the judge (one check), isolation, and results."""
