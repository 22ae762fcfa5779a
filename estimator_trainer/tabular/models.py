"""The structured builders' former home: they are models/tabular.py now;
tf2/canned.py still imports scope_name from here."""

from estimator_trainer.models.tabular import scope_name  # pylint: disable=unused-import
