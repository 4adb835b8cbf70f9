"""A tiny Gemma 3 model and word-level tokenizer, built offline, for the LLM trainer's tests.

Random weights and a vocabulary of the words OpsIncident's text mode, the agent
prompt and the turn markup use: the real model's architecture in a few hundred
kilobytes, loaded in well under a second (the packaged model takes a minute).
"""

import re
from pathlib import Path

SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"]


def _words(env_id, seeds=range(3)):
    import gymnasium as gym

    from feedbackgym.chat import PromptTemplate

    env = gym.make(env_id, obs_mode="text")
    texts = [PromptTemplate.load("agent").system.template, "user model Hint Reviews"]
    texts += list(env.unwrapped.action_meanings)
    for seed in seeds:
        obs, info = env.reset(seed=seed)
        texts.append(obs)
        for _ in range(6):
            obs, *_ = env.step(env.unwrapped.expert_action())
            texts.append(obs)
    env.close()
    words = set()
    for text in texts:
        words.update(re.findall(r"\w+|[^\w\s]+", text))
    return sorted(words)


def save_tiny_model(
    folder,
    env_id="feedbackgym/OpsIncidentEasy-v0",
    *,
    hidden=32,
    layers=2,
    init_range=0.02,
    seeds=range(3),
):
    """Writes a tiny ``Gemma3ForCausalLM`` and its tokenizer to ``folder``; returns it.

    ``init_range`` is the weights' initial standard deviation: the tied output
    layer's logits span about ``init_range * hidden``, so a LoRA adapter (which
    leaves that layer as it is) can fit the replies only with a wider one. The
    vocabulary has the words of the episodes at ``seeds`` (OpsIncident-v1's services vary).
    """
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig, PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate(SPECIALS + _words(env_id, seeds))}
    model = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    model.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=model,
        bos_token="<bos>",
        eos_token="<eos>",
        pad_token="<pad>",
        unk_token="<unk>",
        additional_special_tokens=["<start_of_turn>", "<end_of_turn>"],
    )
    config = Gemma3TextConfig(
        vocab_size=len(vocab),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        max_position_embeddings=4096,
        sliding_window=64,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=2,
        initializer_range=init_range,
    )
    torch.manual_seed(0)
    Gemma3ForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return Path(folder)


def _expert_sequence(tokenizer, env_id, seed, max_steps):
    """An expert episode as the trainer's tokens, and labels on the expert's replies."""
    import gymnasium as gym

    from feedbackgym.chat import PromptTemplate
    from feedbackgym.chat.turns import TurnFormat
    from feedbackgym.language.episode_chat import EpisodeChat

    turns = TurnFormat.load()

    def encode(text):
        return tokenizer.encode(text, add_special_tokens=False)

    env = gym.make(env_id, obs_mode="text", max_episode_steps=max_steps)
    meanings = env.unwrapped.action_meanings
    text = EpisodeChat(PromptTemplate.load("agent"), env_id, tuple(meanings), seed)
    obs, _ = env.reset(seed=seed)
    ids = encode(
        turns.opening_text(
            tokenizer.bos_token, text.system()["content"], text.user(obs, None)["content"]
        )
    )
    labels = [-100] * len(ids)
    done = False
    while not done:
        action = env.unwrapped.expert_action()
        reply = encode(meanings[action] + turns.stop)
        ids, labels = ids + reply, labels + reply
        obs, _, terminated, truncated, _ = env.step(action)
        done = terminated or truncated
        if not done:
            turn = encode(turns.next_text(text.user(obs, None)["content"]))
            ids, labels = ids + turn, labels + [-100] * len(turn)
    env.close()
    return ids, labels


def warm_up(folder, env_id="feedbackgym/OpsIncidentEasy-v0", *, seeds=range(6), steps=40):
    """Trains the tiny model in ``folder`` a little on expert episodes (a stand-in warm-up).

    Its policy then plays some episodes well and some badly, so GRPO's groups
    differ in return (all-equal groups teach nothing).
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder)
    data = [_expert_sequence(tokenizer, env_id, seed, 16) for seed in seeds]
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    torch.manual_seed(0)
    for step in range(steps):
        ids, labels = data[step % len(data)]
        loss = model(input_ids=torch.tensor([ids]), labels=torch.tensor([labels])).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.save_pretrained(folder)
    return Path(folder)
