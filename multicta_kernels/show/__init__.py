"""What the notebooks display: banners, live runs, source and tables; explorers; benchmark plots; figures."""
