"""The LLM trainer: RL of a causal language model with LoRA, by GRPO through TRL; its warm-up.

Read it in this order: :mod:`~.llm_settings` (a run's settings),
:mod:`~.causal_lm` (the model, its tokenizer and its LoRA adapter),
the turn markup of :mod:`feedbackgym.chat.turns`, :mod:`~.action_choice`
(each reply held to the env's actions), :mod:`~.episode_tokens` (one episode played, as tokens),
:mod:`~.grpo_rollout` (a round's groups for TRL's ``GRPOTrainer``),
:mod:`~.feedback_targets` (hints and reviews made training targets for the model
without them: the ``+failure-hints`` and ``+distill`` arms),
:mod:`~.chosen_token_grpo` (the update, its loss at the model's choices),
:mod:`~.run_llm` (the run directory around it, each saved adapter a numbered
version of :mod:`feedbackgym.language.versions`) and :mod:`~.trl_env` (the
public factory that plugs the envs into your own TRL script). The supervised
warm-up on the standard answers, whose adapter the RL starts from:
:mod:`~.sft_data` (expert episodes as the prompts the agent sends) and
:mod:`~.sft` (its run).

torch, transformers, peft and trl load in the modules that use them
(the ``llm-train`` extra).

May import: common
"""
