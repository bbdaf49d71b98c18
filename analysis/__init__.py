"""Analysis over sealed bundles: scores of one bundle, experiment tables and paired contrasts,
diagnostics, figures and the generated report. Pure statistics live in `scoring`."""
