"""The network: Hugging Face's file layout and key names (`checkpoint`) and Google's TensorFlow
names (`tf_checkpoint`), below the model classes; the encoder in the paper's order and the
pre-training heads (`bert`); the task heads (`heads`); the feature-based heads of BERT Sec. 5.3
(`feature_heads`); ELECTRA's generator and discriminator (`electra`); the LSTM era: what its
models share (`lm_base`), Bengio's neural language model (`nnlm`), ELMo's biLM (`elmo`),
AWD-LSTM (`awd_lstm`) and ULMFiT's classifier (`ulmfit`), by name in `lm_architectures`."""
