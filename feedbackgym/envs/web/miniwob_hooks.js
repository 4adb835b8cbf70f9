// Reads a MiniWoB++ task's own state for feedbackgym: its instruction, whether the
// episode is done and the raw reward the task gave (without the time penalty).
(() => {
  "use strict";
  const instruction = () => {
    if (typeof core === "undefined" || !document.getElementById("query")) return "";
    const said = core.getUtterance();
    return typeof said === "string" ? said : said.utterance;
  };
  window.__fgAppState = () => ({
    utterance: instruction(),
    done: typeof WOB_DONE_GLOBAL !== "undefined" && WOB_DONE_GLOBAL === true,
    reward: typeof WOB_RAW_REWARD_GLOBAL === "number" ? WOB_RAW_REWARD_GLOBAL : 0,
    reason: typeof WOB_REWARD_REASON === "string" ? WOB_REWARD_REASON : "",
  });
})();
