// The tenant's guardrail policy (overrides over the platform defaults) and its retention.

import { api } from "../api.js";
import { h } from "../dom.js";
import { frame, statusLine } from "./common.js";

const ACTIONS = ["", "block", "flag", "off"];

function select(id, value, options) {
  return h("select", { id }, options.map((o) => h("option", { value: o, selected: o === (value ?? "") ? true : null }, o || "platform default")));
}

async function guardrails(main) {
  const status = statusLine();
  const { overrides, effective } = await api("/admin/guardrails");
  const injection = select("g-injection", overrides.injection, ACTIONS);
  const abuse = select("g-abuse", overrides.abuse, ACTIONS);
  const pii = select("g-pii", overrides.pii, ACTIONS);
  const smalltalk = select("g-smalltalk", overrides.smalltalk === undefined ? "" : String(overrides.smalltalk), ["", "true", "false"]);
  const topics = h("input", { type: "text", id: "g-topics", value: (overrides.topics || []).join(", ") });
  const threshold = h("input", { type: "number", id: "g-faq", step: "0.01", min: "0.01", max: "1", value: overrides.faq_threshold ?? "" });
  const inEffect = h("pre", { class: "json" }, JSON.stringify(effective, null, 2));
  const form = h(
    "form",
    { class: "card" },
    h("div", { class: "row" }, h("div", {}, h("label", { for: "g-injection" }, "Prompt injection"), injection), h("div", {}, h("label", { for: "g-abuse" }, "Abuse"), abuse), h("div", {}, h("label", { for: "g-pii" }, "Personal data"), pii), h("div", {}, h("label", { for: "g-smalltalk" }, "Small talk fast path"), smalltalk)),
    h("label", { for: "g-topics" }, "Allowed topics (comma-separated; empty: any topic)"),
    topics,
    h("label", { for: "g-faq" }, "FAQ similarity threshold (empty: platform default)"),
    threshold,
    h("button", { type: "submit", class: "primary" }, "Save policy"),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = {};
    for (const [key, el] of [["injection", injection], ["abuse", abuse], ["pii", pii]]) if (el.value) body[key] = el.value;
    if (smalltalk.value) body.smalltalk = smalltalk.value === "true";
    const list = topics.value.split(",").map((t) => t.trim()).filter(Boolean);
    if (list.length) body.topics = list;
    if (threshold.value) body.faq_threshold = Number(threshold.value);
    try {
      const saved = await api("/admin/guardrails", { method: "PUT", body });
      inEffect.textContent = JSON.stringify(saved.effective, null, 2);
      status.say("Saved.");
    } catch (e) {
      status.fail(e);
    }
  });
  frame(main, "Guardrail policy", status.el, form, h("section", { class: "card" }, h("h2", {}, "In effect"), inEffect));
}

async function retention(main) {
  const status = statusLine();
  const policy = await api("/admin/retention");
  const days = h("input", { type: "number", id: "r-days", min: "1", step: "1", value: policy.max_turn_age_days ?? "" });
  const form = h("form", { class: "card" }, h("p", {}, "Turns older than this are purged by the scheduled sweep. Empty: kept until their users erase them."), h("label", { for: "r-days" }, "Keep turns for (days)"), days, h("button", { type: "submit", class: "primary" }, "Save"));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const saved = await api("/admin/retention", { method: "PUT", body: { max_turn_age_days: days.value ? Number(days.value) : null } });
      status.say(saved.max_turn_age_days ? `Turns are kept ${saved.max_turn_age_days} days.` : "Turns are kept until erased.");
    } catch (e) {
      status.fail(e);
    }
  });
  frame(main, "Retention", status.el, form);
}

export async function render(main, key) {
  return key === "retention" ? retention(main) : guardrails(main);
}
