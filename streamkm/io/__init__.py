"""Records in and out: the source and sink contracts, the connector registry, record
decoding and rejections, the batcher, the checkpoint store and model export."""
