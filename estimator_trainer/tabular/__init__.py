"""Structured (tabular) data: CSV files or TFRecords of tf.Example with
numeric and categorical columns and a label, described by a feature spec,
preprocessed by Keras preprocessing layers with statistics stored in the
model_dir, and the Keras counterparts of the canned Estimators' models."""
