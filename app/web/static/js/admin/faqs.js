// FAQs: entries a close enough question is answered from, without the model.

import { api } from "../api.js";
import { h, mount } from "../dom.js";
import { setMarkdown } from "../markdown.js";
import { frame, statusLine, table, when } from "./common.js";

export async function render(main) {
  const status = statusLine();
  const list = h("div");
  const question = h("input", { type: "text", id: "faq-question", required: true, maxlength: "1000" });
  const answer = h("textarea", { id: "faq-answer", rows: "3", required: true, maxlength: "8000" });
  const form = h("form", { class: "card", "aria-labelledby": "faq-new" }, h("h2", { id: "faq-new" }, "Add an entry"), h("label", { for: "faq-question" }, "Question"), question, h("label", { for: "faq-answer" }, "Answer (Markdown)"), answer, h("button", { type: "submit", class: "primary" }, "Add"));

  async function load() {
    const { items } = await api("/admin/faqs");
    mount(list, table([["Question", (f) => f.question], ["Answer", (f) => {
      const cell = h("div", { class: "markdown" });
      setMarkdown(cell, f.answer);
      return cell;
    }], ["Added", (f) => when(f.created_at)], ["", (f) => h("button", { type: "button", class: "secondary danger", onclick: () => remove(f) }, "Delete")]], items, "No FAQ entries."));
  }
  async function remove(faq) {
    try {
      await api(`/admin/faqs/${faq.id}`, { method: "DELETE" });
      status.say("Deleted.");
      await load();
    } catch (e) {
      status.fail(e);
    }
  }
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      await api("/admin/faqs", { method: "POST", body: { question: question.value, answer: answer.value } });
      status.say("Added.");
      question.value = "";
      answer.value = "";
      await load();
    } catch (e) {
      status.fail(e);
    }
  });
  frame(main, "FAQs", status.el, form, h("section", { class: "card", "aria-labelledby": "faq-list" }, h("h2", { id: "faq-list" }, "Entries"), list));
  await load();
}
