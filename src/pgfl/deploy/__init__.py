"""pgfl for real: every server and client its own process, with its own keys.

``pgfl deploy CONFIG --local --out DIR`` runs a configuration's curves with one process
per unit server, one per client and one per trusted party (the aggregator of central DP,
the dealer of topology-optimized noise) on this machine, and writes what ``pgfl run``
writes (``summary.json``, ``curves.csv``, ``figure.png``) through the same runner;
with ``deploy.servers`` the parties run on separate hosts (``docs/deploy.md``).

* clients ↔ their server: Flower's application and message API — each client is a
  Flower ``ClientApp`` whose secure aggregation and client noise are Flower mods
  (:mod:`pgfl.deploy.client`), each server drives them through a Flower ``Grid``
  (:mod:`pgfl.deploy.server`, :mod:`pgfl.deploy.rounds`) — carried by gRPC streams with
  mutual TLS (Flower's own deployment runtime, SuperLink and SuperNodes, is too slow per
  message for the rounds of a run: ``docs/deploy.md`` gives the measurements);
* servers ↔ servers, trusted parties, coordinator: gRPC with mutual TLS
  (:mod:`pgfl.deploy.wire`, :mod:`pgfl.deploy.trusted`);
* payloads: Flower ``RecordDict``/``Message`` in Flower's protobuf schema;
* the numbers: the engine's own step functions (:mod:`pgfl.engine.step`) and the split
  secure-aggregation protocol (:mod:`pgfl.privacy.secagg.parties`); in simulation mode
  the keyed draws of the seed (a deployed run reproduces ``pgfl run``), in deployment
  mode each party's own secure generator (:mod:`pgfl.deploy.draws`).

Needs the extra ``pgfl[deploy]`` (Flower and gRPC); nothing here is imported by ``pgfl run``.
"""
