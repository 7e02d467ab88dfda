"""biaslab: tracked measurement and mitigation of gender bias in language models.

Importing the package is cheap: heavy libraries (torch, transformers, mlflow) are imported by the
modules that need them, never here.
"""

__version__ = "0.1.0"
