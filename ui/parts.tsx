/** Small Preact pieces the pages share. */

/** An error said in words, announced to screen readers; nothing when there is none. */
export function Problem({ text }: { text: string }) {
	return text ? (
		<p class="error" role="alert">
			{text}
		</p>
	) : null;
}
