"""Fine-tuning: `finetune.finetune` over seeds (the best kept, a model card written), one seed's
loop in `loop`, and `one_class`, the check for a run that learned only one class.
"""
