"""Storage sinks over one layer, Confluent's storage-common semantics: formats (:mod:`.formats`), partitioners
(:mod:`.partitioners`), object names and rotation (:mod:`.layout`), the writer and the shared keys (:mod:`.common`);
one module per store (:mod:`.s3`)."""
