"""The GPU layer: device code in fatbins and cubins, GPUs and the driver, and what runs where."""
