"""The run directory every application uses: the output folder and its lock, the inputs and their hashes, the two
views (``coordinator_view/``, ``simulation_evaluation/``), checkpoints and resume, stop signals."""
