// My data: download everything held about me; erase my account behind a typed confirmation.

import { api, forget, humanError, request, setNotice, toError } from "./api.js";
import { announce, h, mount } from "./dom.js";

const PHRASE = "erase my account";

export async function mePage(main) {
  document.title = "My data — Threadline";
  const exportButton = h("button", { type: "button", class: "primary" }, "Download my data (JSON)");
  const exportStatus = h("p", { class: "muted", role: "status" });
  const confirm = h("input", { id: "erase-confirm", type: "text", autocomplete: "off", spellcheck: "false" });
  const eraseButton = h("button", { type: "button", class: "danger", disabled: true }, "Erase my account");
  const eraseStatus = h("p", { role: "status" });
  const me = await api("/me");

  exportButton.addEventListener("click", async () => {
    exportButton.disabled = true;
    exportStatus.textContent = "Preparing your export…";
    try {
      const response = await request("/me/export");
      if (!response.ok) throw await toError(response);
      const blob = await response.blob();
      const url = URL.createObjectURL(blob);
      const link = h("a", { href: url, download: `threadline-export-${new Date().toISOString().slice(0, 10)}.json` });
      document.body.append(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
      exportStatus.textContent = `Downloaded (${Math.ceil(blob.size / 1024)} KB).`;
    } catch (e) {
      exportStatus.textContent = humanError(e);
    } finally {
      exportButton.disabled = false;
    }
  });

  confirm.addEventListener("input", () => {
    eraseButton.disabled = confirm.value.trim().toLowerCase() !== PHRASE;
  });
  eraseButton.addEventListener("click", async () => {
    eraseButton.disabled = true;
    try {
      await api("/me", { method: "DELETE" });
      announce("Your account and data were erased.");
      setNotice("Your account and all its data were erased.");
      history.replaceState(null, "", "#/"); // no hashchange: the sign-in page shows the notice
      await forget();
    } catch (e) {
      eraseStatus.textContent = humanError(e);
      eraseButton.disabled = false;
    }
  });

  mount(
    main,
    h(
      "div",
      { class: "page" },
      h("h1", {}, "My data"),
      h("p", {}, `Signed in as ${me.email} (${me.role}).`),
      h(
        "section",
        { class: "card", "aria-labelledby": "export-title" },
        h("h2", { id: "export-title" }, "Export"),
        h("p", {}, "Everything Threadline holds about you — conversations, answers and how they were built, attachments, API keys, logins — as one JSON file."),
        exportButton,
        exportStatus,
      ),
      h(
        "section",
        { class: "card danger-zone", "aria-labelledby": "erase-title" },
        h("h2", { id: "erase-title" }, "Erase my account"),
        h("p", {}, "This deletes your account and all its data at once. It cannot be undone; you will be signed out and your login will stop working."),
        h("label", { for: "erase-confirm" }, `Type “${PHRASE}” to confirm`),
        confirm,
        eraseButton,
        eraseStatus,
      ),
    ),
  );
}
