/**
 * The dashboard's keyboard shortcuts (docs/dashboard.md, "Keyboard"): `g` then a page's letter goes to that page, `/`
 * puts the cursor in the page's filter or search field, `?` opens the help dialog that lists them (a modal <dialog>:
 * Escape or its button closes it, and the focus goes back where it was). None fires while typing in a field.
 * Also where the focus lands at each navigation: the new page's main heading (useLandingFocus).
 */
import { useEffect, useRef } from "preact/hooks";

/** A page a shortcut goes to: #/<path>, its name, its letter after `g`. */
export interface ShortcutPage {
	path: string;
	label: string;
	key: string;
}

/** How long after `g` its letter is waited for. */
const SEQUENCE_MS = 1500;

/** The fields a page filters or searches with, in the order `/` prefers them. */
const FILTER =
	'main [role="search"] input, main [role="search"] select, main form.filters input, main input[type="search"]';

/** Whether a key pressed there is typing (a field, a list to choose from, editable text), not a shortcut. */
function typing(target: EventTarget | null): boolean {
	const el = target as HTMLElement | null;
	return !!el && (el.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(el.tagName));
}

/** Listens for the shortcuts while `enabled` (signed in, no dialog open). */
export function useShortcuts(enabled: boolean, pages: ShortcutPage[], openHelp: () => void): void {
	const latest = useRef({ pages, openHelp });
	latest.current = { pages, openHelp };
	useEffect(() => {
		if (!enabled) return;
		let afterG: ReturnType<typeof setTimeout> | undefined;
		const onKey = (e: KeyboardEvent) => {
			if (e.defaultPrevented || e.ctrlKey || e.metaKey || e.altKey || typing(e.target)) return;
			if (afterG !== undefined) {
				clearTimeout(afterG);
				afterG = undefined;
				const page = latest.current.pages.find(p => p.key === e.key);
				if (page) {
					e.preventDefault();
					location.hash = `#/${page.path}`;
				}
				return;
			}
			if (e.key === "g") afterG = setTimeout(() => (afterG = undefined), SEQUENCE_MS);
			else if (e.key === "/") {
				const field = document.querySelector<HTMLElement>(FILTER);
				if (field) {
					e.preventDefault();
					field.focus();
				}
			} else if (e.key === "?") {
				e.preventDefault();
				latest.current.openHelp();
			}
		};
		document.addEventListener("keydown", onKey);
		return () => {
			clearTimeout(afterG);
			document.removeEventListener("keydown", onKey);
		};
	}, [enabled]);
}

function Keys({ keys }: { keys: string[] }) {
	return (
		<>
			{keys.map((k, i) => (
				<span key={i}>
					{i > 0 ? " then " : ""}
					<kbd>{k}</kbd>
				</span>
			))}
		</>
	);
}

/** The help dialog: every shortcut of the pages the role is offered. Modal; closed by Escape or its button. */
export function Shortcuts({ pages, onClose }: { pages: ShortcutPage[]; onClose: () => void }) {
	const dialog = useRef<HTMLDialogElement>(null);
	useEffect(() => {
		const d = dialog.current as HTMLDialogElement;
		const before = document.activeElement as HTMLElement | null;
		d.showModal();
		return () => {
			if (d.open) d.close();
			// Back where the keyboard was before the dialog opened.
			before?.focus?.();
		};
	}, []);
	const rows: Array<[string[], string]> = [
		...pages.map(p => [["g", p.key], `Go to ${p.label}`] as [string[], string]),
		[["/"], "Put the cursor in the page's filter or search field"],
		[["?"], "Show this help"],
		[["Esc"], "Close this help"],
	];
	return (
		<dialog id="shortcuts-help" ref={dialog} aria-labelledby="shortcuts-title" onClose={onClose}>
			<h2 id="shortcuts-title">Keyboard shortcuts</h2>
			<p class="muted">Not while typing in a field.</p>
			<table>
				<tbody>
					{rows.map(([keys, what]) => (
						<tr key={what}>
							<td class="nowrap">
								<Keys keys={keys} />
							</td>
							<td>{what}</td>
						</tr>
					))}
				</tbody>
			</table>
			<p>
				<button type="button" onClick={() => dialog.current?.close()}>
					Close
				</button>
			</p>
		</dialog>
	);
}

/**
 * At each navigation (`navigation` changes; null: signed out), moves the focus to the new page's main heading (its
 * h1, given tabindex=-1), so that a keyboard or a screen reader starts on the page it asked for. A page that draws its
 * heading only once its data came (or draws another one then) is waited for, until the user moves the focus
 * elsewhere: a field being typed in, or anything focused in the page, is never taken from. A page writing its view
 * into the URL (history.replaceState, no hashchange) is not a navigation.
 */
export function useLandingFocus(navigation: string | null): void {
	useEffect(() => {
		const main = document.getElementById("main");
		if (navigation === null || !main) return;
		/** The heading the focus was put on. */
		let landed: HTMLElement | null = null;
		const land = () => {
			const heading = main.querySelector<HTMLElement>("h1");
			// None yet, or the one landed on is still there.
			if (!heading || landed?.isConnected) return;
			const active = document.activeElement;
			if (active && active !== document.body && (typing(active) || main.contains(active))) return stop();
			landed = heading;
			heading.tabIndex = -1;
			heading.focus();
		};
		// The user moved the focus: theirs from now on.
		const moved = (e: FocusEvent) => e.target !== landed && stop();
		const observer = new MutationObserver(land);
		const stop = () => {
			observer.disconnect();
			document.removeEventListener("focusin", moved);
		};
		observer.observe(main, { childList: true, subtree: true });
		document.addEventListener("focusin", moved);
		land();
		return stop;
	}, [navigation]);
}
