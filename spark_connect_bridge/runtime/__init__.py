"""The worker: connector lifecycle, durable configs and target states, the topic store, offsets in checkpoints.

Entry points: :class:`~spark_connect_bridge.runtime.standalone.RunningWorker` (a worker with its REST API),
:class:`~spark_connect_bridge.runtime.service.ConnectService` (the service layer the REST API and CLI use).
Submodules are imported on use, so importing this package stays cheap.
"""
