"""The run's HTML report: gather the data, draw the figures, render one page."""
