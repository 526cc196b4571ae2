"""The per-run `report.html`: timeline, latency and throughput with faults shaded, the quorum's
leaders and epochs, and every anomaly with the operations it cites. Plots are PNGs drawn from
binned data, so the page stays a few hundred kilobytes whatever the history's size."""
